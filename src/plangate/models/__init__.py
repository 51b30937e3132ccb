"""Models: a scripted model for tests and demos, and configuration of real models."""
