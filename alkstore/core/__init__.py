"""Engine-neutral logic, free of I/O: validation, options, backoff, payloads, snapshots."""
