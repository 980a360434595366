"""shared/cli"""
