"""shared/launcher"""
