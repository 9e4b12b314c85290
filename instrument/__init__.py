"""ETT instrumentation: the library a PyTorch trainer imports to emit ETT spans."""
