"""The deployable fused magnetic–inertial shape estimator (seed 002, III-B): the scripted estimator, its
`torch.export` graph, options, flags, fix confidence, bias models, heading filter and state buffers.
"""
