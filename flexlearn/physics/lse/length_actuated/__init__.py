"""Length-actuated continuum parallel robots (rod lengths as inputs): inverse statics with the platform pose
given (`statics.PoseStatics`), on compiled kernels, single poses, paths and batches.
"""
