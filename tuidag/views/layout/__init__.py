"""Where every task goes on the graph canvas and how the edges between them are drawn, as plain text.

A pure function of the DAG and a `LayoutStyle` (no textual), so the UI canvas only paints and the geometry is
unit-testable as text.

- Layers are longest-path layers: dependencies flow left to right (`Orientation.LR`) or top down (`TD`). The layout
  is computed in one frame of reference, "across" (the axis a layer's tasks stack along: rows in LR) and "along"
  (the axis layers follow each other on: columns in LR), and turned into screen cells at the end, so both
  orientations share every step below. A task's box is a `Tile`: a bordered box (`Zoom.FULL`), one line
  (`COMPACT`), or one cell (`DOTS`).
- A layer with more tasks than fit across the screen is packed into a block, a grid of several sub-columns (rows in
  TD) that fills the screen the other way; the edges into and out of it meet one bracket on each side, a bus,
  instead of one line per task.
- An edge that skips layers passes through the skipped ones on a "dummy" slot (a one-cell pass-through); the long
  edges of one node share their dummies until they reach their children, so a fan-out over several layers is one
  line.
- The order within a layer comes from a few barycenter sweeps, keeping the order with the fewest crossings.
- Positions across pull each slot towards its neighbours (down and up passes); within a layer the order is kept and
  slots never overlap, solved exactly per layer by isotonic regression (pool adjacent violators).
- Edges are routed in the gap between two layers: each parent gets a track, shared by parents whose spans don't
  meet and by parents whose only child is the same node (a bus into it). Every cell collects direction bits mapped
  to box-drawing characters, so fan-in and fan-out merge into trees of ┌┐└┘├┤┬┴┼ with an arrow at the child. Tracks
  are ordered so that a parent's line never runs into another parent's junction on its own row: read along the
  edges, a line only joins what it really feeds.
- Edge text is made per line on demand and cached: a big DAG's edges cover far more cells than a screen shows.
- Left to right, a graph wider than the screen wraps into bands stacked down it where it can (`bands`): a
  long chain reads like lines of text, each band's end joined to the next band's start.

The stages, one module each: `style` (zoom, orientation, sizes) and `shape` (what a style packs, estimated sizes),
`choice` (the style a run starts in), `placement` (layers, order, positions across) with `bands`, `routing` (edges
between layers, the tiles) drawn by `edges`, `layout` (the `GraphLayout` the canvas reads), `build` (the stages in
order, and the layout cache), `text` (a layout as plain text).
"""
