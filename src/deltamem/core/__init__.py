"""Pure algorithm code: residual trees, retrieval maths, chain rendering. No I/O."""
