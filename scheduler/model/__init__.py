"""Pure data: quantities, resources, pods and nodes as compact structs. No I/O, no framework."""
