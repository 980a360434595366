"""shared/middleware"""
