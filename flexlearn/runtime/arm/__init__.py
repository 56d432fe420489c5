"""The deployable flexible-arm controller (seed 000, §V-B): settings, the scripted controller, its lean step,
its `torch.export` graph, link loads and the export/load of the controller file.
"""
