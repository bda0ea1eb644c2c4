// Uploads one file to a tus endpoint with tus-js-client; prints the number of PATCH requests it took, then
// the upload URL, once it finished.
// Usage: node upload.mjs <endpoint> <file> <chunkSize>
import fs from "node:fs";
import path from "node:path";
import { Upload } from "tus-js-client";

const [endpoint, file, chunkSize] = process.argv.slice(2);
if (!endpoint || !file || !chunkSize) {
  console.error("usage: node upload.mjs <endpoint> <file> <chunkSize>");
  process.exit(2);
}

let patches = 0;
const upload = new Upload(fs.createReadStream(file), {
  endpoint,
  chunkSize: Number(chunkSize),
  uploadSize: fs.statSync(file).size,
  retryDelays: [0, 500, 1000],
  metadata: { filename: path.basename(file), filetype: "application/octet-stream" },
  onAfterResponse(req) {
    if (req.getMethod() === "PATCH") patches += 1;
  },
  onError(error) {
    console.error(`upload failed: ${error.message ?? error}`);
    process.exit(1);
  },
  onSuccess() {
    console.log(`patches=${patches}`);
    console.log(upload.url);
  },
});
upload.start();
