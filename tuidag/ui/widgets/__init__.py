"""Widgets of the run screen: the graph canvas, the run header and the log pane."""
