"""shared/jobs"""
