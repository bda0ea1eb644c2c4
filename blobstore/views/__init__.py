"""Media views: pages of a PDF, segments of audio, keyframes of video, regions of images (docs/views.md)."""
