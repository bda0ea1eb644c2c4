"""The engines behind the views, one module each behind a small interface: PDFium (``pdfium``), PyAV over
FFmpeg (``av``), Tesseract (``tesseract``), Pillow (``pillow``) and the scene-cut measure on numpy arrays
(``scenes``).

They are plain blocking functions over a file path or decoded pixels, run only in a decoder worker
(:mod:`blobstore.views.worker`), and each imports its library on first use, so a worker that renders a page
never loads FFmpeg. They raise the catalogue's media errors for bytes they refuse and need nothing of each
other: the jobs that combine them are :mod:`blobstore.views.jobs`.
"""
