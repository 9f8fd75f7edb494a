"""A Flower App running federated co-training with cotrain."""
