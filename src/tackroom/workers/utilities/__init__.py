"""The ``utilities`` worker: a calculator and a clock, offered to models as tools."""
