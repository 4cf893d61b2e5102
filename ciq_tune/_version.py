"""The ciq-tune version: one source for the package metadata and the files we write."""

__version__ = "0.1.0"
