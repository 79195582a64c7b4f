"""What the plumbing and porcelain commands share: the entry point, the context, ref arguments, progress."""
