"""shared/observability"""
