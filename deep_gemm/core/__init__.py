"""The dispatcher plumbing every op family stands on: the schema table (schemas) and the op registry (registry),
the eager fast path past the dispatcher (eager, guards), argument errors (errors), Triton launches and their replay
(launch, plans, scratch, first_import), the runtime knobs (runtime, runtime_ops, config) and the device
architecture's capabilities (arch)."""
