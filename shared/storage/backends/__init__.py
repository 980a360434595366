"""Storage backends by technology: `local` (filesystem, the default) and `s3` (boto3)."""
