"""Calibration: published and measured figures as data, and comparisons with the model."""
