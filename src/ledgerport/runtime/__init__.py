"""Hosted-function runtime: sandbox worker processes running V8."""
