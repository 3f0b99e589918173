"""Layers shared by the model families: embedding, encoders, pooling, the model base class."""
