// The page under test, bundled by esbuild into bundle.js and served from a second origin. It uploads the
// served file.bin to the blobstore tus endpoint with Uppy's tus plugin, and reads a range back with fetch().
import Uppy from "@uppy/core";
import Tus from "@uppy/tus";

const FILE_NAME = "browser-upload.bin";
const FILE_TYPE = "application/octet-stream";
// A fixed lastModified keeps Uppy's file id, and so the tus fingerprint in localStorage, the same across a
// reload: what lets the second page find and resume the first page's upload.
const LAST_MODIFIED = 1700000000000;

const log = (window.blobstoreLog = []);

function record(kind, fields) {
  log.push({ kind, ...fields });
}

// Runs one upload attempt. With `stallAfterPatches`, every PATCH after that many is held forever before it is
// sent (window.blobstoreStalled turns true), so the page can be reloaded at a known offset.
window.runUpload = async ({ endpoint, token, chunkSize, stallAfterPatches }) => {
  const bytes = await (await fetch("/file.bin")).arrayBuffer();
  const file = new File([bytes], FILE_NAME, { type: FILE_TYPE, lastModified: LAST_MODIFIED });
  const uppy = new Uppy({ autoProceed: false });
  let patches = 0;
  let artifactId = null;
  uppy.use(Tus, {
    endpoint,
    chunkSize,
    headers: { Authorization: `Bearer ${token}` },
    retryDelays: [],
    onBeforeRequest(req) {
      const method = req.getMethod();
      record("request", { method, url: req.getURL(), offset: req.getHeader("Upload-Offset") ?? null });
      if (method === "PATCH") {
        patches += 1;
        if (stallAfterPatches != null && patches > stallAfterPatches) {
          window.blobstoreStalled = true;
          return new Promise(() => {});
        }
      }
      return undefined;
    },
    onAfterResponse(req, res) {
      // Readable only if the server exposes them (Access-Control-Expose-Headers).
      const offset = res.getHeader("Upload-Offset") ?? null;
      record("response", { method: req.getMethod(), status: res.getStatus(), offset });
      const id = res.getHeader("Blobstore-Artifact-Id");
      if (id) artifactId = id;
    },
  });
  uppy.on("upload-progress", (f) => {
    if (f.tus?.uploadUrl) window.blobstoreUploadUrl = f.tus.uploadUrl;
  });
  uppy.addFile({ name: FILE_NAME, type: FILE_TYPE, data: file, source: "Local" });
  const result = await uppy.upload();
  const failed = (result?.failed ?? []).map((f) => String(f.error));
  const done = result?.successful?.[0];
  return { artifactId, failed, uploadUrl: done?.uploadURL ?? done?.response?.uploadURL ?? null };
};

// A ranged download as a page does it: a cross-origin fetch() with Range (and the bearer token).
window.readRange = async ({ url, token, start, end }) => {
  const response = await fetch(url, { headers: { Authorization: `Bearer ${token}`, Range: `bytes=${start}-${end}` } });
  const body = new Uint8Array(await response.arrayBuffer());
  let binary = "";
  for (const byte of body) binary += String.fromCharCode(byte);
  return {
    status: response.status,
    contentRange: response.headers.get("Content-Range"),
    acceptRanges: response.headers.get("Accept-Ranges"),
    etag: response.headers.get("ETag"),
    contentLength: response.headers.get("Content-Length"),
    body: btoa(binary),
  };
};
