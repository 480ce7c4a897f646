"""Workbench: vectorized cost models of LLM training and inference on GPUs and wafer-scale engines."""
__version__ = "0.1.0"
