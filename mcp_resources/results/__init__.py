"""What answers carry: resource links, inline blocks within budgets, cached downscales, spliced blobs."""
