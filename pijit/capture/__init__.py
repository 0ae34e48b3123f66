"""Capture: a frame's bytecode and arguments -> CaptureResult (graph, guards, return structure)."""
