"""tackroom: an agent harness built from replaceable workers on one engine bus."""
