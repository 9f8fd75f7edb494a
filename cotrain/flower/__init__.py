"""Deployment on Flower: a ClientApp per site and a ServerApp running the cotrain round."""
