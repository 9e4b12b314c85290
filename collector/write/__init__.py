"""The write side: ingest (decoded OTLP into spans, segments and figures), the periodic
sweeps and retention."""
