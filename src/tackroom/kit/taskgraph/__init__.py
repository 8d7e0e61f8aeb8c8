"""Task graphs as data: references and conditions (``refs``), the checks (``check``), and
reading a ``tasks.yaml`` with line numbers (``load``). Shared by the ``tasks`` worker, the
facade and the CLI."""

from tackroom.kit.taskgraph.check import dependencies, order
from tackroom.kit.taskgraph.load import GraphError, check_graph, load_graph, parse_graph

__all__ = ["GraphError", "check_graph", "dependencies", "load_graph", "order", "parse_graph"]
