"""PEDL 0.10/0.11's module layout (`pedl.frameworks.pytorch`, `.keras`, `.tensorflow`).

Model definitions written for those releases import from here unchanged; each interface is a thin
adapter onto the same controllers as `pedl.pytorch`, `pedl.keras` and `pedl.tensorflow`.
"""
