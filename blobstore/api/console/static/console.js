// The console's only script: copy buttons, previews loaded on demand, and resumable chunked uploads.
// It talks to the API under /console/api/ (the server acts as the HttpOnly session cookie's session) and
// sends the page's CSRF token with every change. Text from the server is only ever set as textContent.
"use strict";

const API = "/console/api/v1";
const csrf = () => document.querySelector('meta[name="csrf-token"]')?.content ?? "";
const $ = (id) => document.getElementById(id);

function copyText(text, button) {
  const done = () => {
    button.textContent = "Copied";
    button.dataset.copied = "1";
  };
  if (navigator.clipboard?.writeText) {
    navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
  } else {
    fallbackCopy(text, done);
  }
}

function fallbackCopy(text, done) {
  const area = document.createElement("textarea");
  area.value = text;
  document.body.append(area);
  area.select();
  document.execCommand("copy");
  area.remove();
  done();
}

function wireCopyButtons() {
  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", () => {
      const source = $(button.dataset.copy);
      copyText(source.value ?? source.textContent, button);
    });
  }
}

function wirePreview() {
  const full = $("full-size");
  if (full) {
    full.addEventListener("click", () => {
      const image = $("preview-image");
      image.src = image.dataset.full;
      full.disabled = true;
    });
  }
  const more = $("more-text");
  if (more) {
    const decoder = new TextDecoder();
    more.addEventListener("click", async () => {
      const offset = Number(more.dataset.offset);
      const size = Number(more.dataset.size);
      const end = Math.min(size, offset + 256 * 1024) - 1;
      const response = await fetch(more.dataset.src, { headers: { Range: `bytes=${offset}-${end}` } });
      const bytes = new Uint8Array(await response.arrayBuffer());
      $("preview-text").append(document.createTextNode(decoder.decode(bytes, { stream: end + 1 < size })));
      more.dataset.offset = String(end + 1);
      if (end + 1 >= size) more.remove();
    });
  }
  const verify = $("verify");
  if (verify) {
    verify.addEventListener("click", async () => {
      verify.disabled = true;
      const result = $("verify-result");
      const response = await fetch(verify.dataset.src);
      if (!response.ok) {
        result.textContent = `verification failed (${response.status})`;
        return;
      }
      const body = await response.json();
      result.textContent = body.summary; // worded by the server: "22 blocks of 1 MiB, each checked ..."
      result.dataset.verified = body.sha256_matches ? "1" : "0";
    });
  }
  const pdf = $("pdf");
  if (pdf) {
    const show = async (page) => {
      pdf.dataset.page = String(page);
      $("pdf-at").textContent = String(page);
      $("pdf-page").src = `${pdf.dataset.base}${page}.png`;
      const text = await fetch(`${pdf.dataset.base}${page}.txt`);
      $("pdf-text").textContent = text.ok ? await text.text() : "";
    };
    const pages = Number(pdf.dataset.pages);
    $("pdf-prev").addEventListener("click", () => show(Math.max(1, Number(pdf.dataset.page) - 1)));
    $("pdf-next").addEventListener("click", () => show(Math.min(pages, Number(pdf.dataset.page) + 1)));
    show(1);
  }
}

// -- uploads -----------------------------------------------------------------------------------------------

const STORE_PREFIX = "blobstore-upload:";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function identity(file, path) {
  return `${STORE_PREFIX}${path}:${file.size}:${file.lastModified}`;
}

async function api(method, path, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRF-Token"] = csrf();
  if (body !== undefined) {
    if (body instanceof Blob) {
      init.body = body;
      init.headers["Content-Type"] = "application/octet-stream";
    } else {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
  }
  return fetch(`${API}${path}`, init);
}

// A request that fails to reach the server (a dropped connection) is tried again, with a growing pause.
async function persistently(send) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await send();
    } catch (error) {
      if (attempt >= 8) throw error;
      await sleep(Math.min(8000, 250 * 2 ** attempt));
    }
  }
}

async function problem(response) {
  try {
    const body = await response.json();
    return body.detail || body.title || `HTTP ${response.status}`;
  } catch {
    return `HTTP ${response.status}`;
  }
}

function uploadRow(path, size) {
  const row = document.createElement("li");
  row.dataset.state = "starting";
  row.dataset.path = path;
  const name = document.createElement("div");
  name.className = "name";
  name.textContent = path;
  const bar = document.createElement("progress");
  bar.max = Math.max(1, size);
  bar.value = 0;
  const status = document.createElement("div");
  status.className = "hint status";
  row.append(name, bar, status);
  $("uploads").append(row);
  return { row, bar, status };
}

async function existingUpload(key) {
  const saved = localStorage.getItem(key);
  if (!saved) return null;
  const { uploadId } = JSON.parse(saved);
  const response = await persistently(() => api("GET", `/uploads/${uploadId}`));
  if (!response.ok) {
    localStorage.removeItem(key);
    return null;
  }
  const status = await response.json();
  if (status.state !== "open" && status.state !== "completed" && status.state !== "completing") {
    localStorage.removeItem(key);
    return null;
  }
  return status;
}

async function uploadFile(file, path) {
  const view = uploadRow(path, file.size);
  const key = identity(file, path);
  try {
    let status = await existingUpload(key);
    let received = new Set();
    if (status) {
      received = new Set(status.chunks_received);
      view.row.dataset.resumed = String(received.size);
      view.status.textContent = `resuming: ${received.size} of ${status.chunk_count} chunks are on the server`;
    } else {
      const body = { name: path, size: file.size };
      if (/^[\w.+-]+\/[\w.+-]+$/.test(file.type)) body.mime_type = file.type;
      const created = await persistently(() => api("POST", "/uploads", body));
      if (!created.ok) throw new Error(await problem(created));
      status = await created.json();
      localStorage.setItem(key, JSON.stringify({ uploadId: status.upload_id, name: path, size: file.size }));
    }
    view.row.dataset.uploadId = status.upload_id;
    const chunkSize = status.chunk_size;
    const count = Math.max(1, Math.ceil(file.size / chunkSize));
    let sent = 0;
    for (const index of received) sent += Math.min(chunkSize, file.size - index * chunkSize);
    view.bar.value = sent;
    view.row.dataset.state = "uploading";
    for (let index = 0; index < count && status.state === "open"; index += 1) {
      if (received.has(index)) continue;
      const chunk = file.slice(index * chunkSize, Math.min(file.size, (index + 1) * chunkSize));
      const answer = await persistently(() => api("PUT", `/uploads/${status.upload_id}/chunks/${index}`, chunk));
      if (!answer.ok) throw new Error(await problem(answer));
      sent += chunk.size;
      view.bar.value = sent;
      view.status.textContent = `${index + 1} of ${count} chunks`;
    }
    let artifactId = status.artifact_id;
    if (!artifactId) {
      const completed = await persistently(() => api("POST", `/uploads/${status.upload_id}/complete`));
      if (!completed.ok) throw new Error(await problem(completed));
      artifactId = (await completed.json()).id;
    }
    localStorage.removeItem(key);
    for (const pending of document.querySelectorAll("#pending li")) {
      if (pending.dataset.key === key) pending.remove();
    }
    view.bar.value = view.bar.max;
    const twins = await (await fetch(`/console/artifacts/${artifactId}/twins`)).json();
    const earlier = twins.same_content[0];
    view.row.dataset.state = "done";
    view.row.dataset.artifactId = artifactId;
    view.row.dataset.dedup = earlier ? "same content" : "new";
    const resumed = view.row.dataset.resumed ? ` (resumed with ${view.row.dataset.resumed} of ${count} chunks)` : "";
    const artifactLink = (id) => {
      const link = document.createElement("a");
      link.href = `/console/artifacts/${id}`;
      link.textContent = id;
      return link;
    };
    // A deduplicated upload is a new artifact over content the namespace held already: say both.
    view.status.textContent = `stored as `;
    view.status.append(artifactLink(artifactId));
    if (earlier) {
      view.status.append(document.createTextNode(": same content as "), artifactLink(earlier.id));
      view.status.append(document.createTextNode(`, no new bytes${resumed}`));
    } else {
      view.status.append(document.createTextNode(resumed));
    }
  } catch (error) {
    view.row.dataset.state = "failed";
    view.status.textContent = `failed: ${error.message}`;
  }
}

async function uploadAll(entries) {
  // One file after the other: each is already sent in chunks, and the list shows them in order.
  for (const [file, path] of entries) await uploadFile(file, path);
}

// The files of a dropped folder, with their paths inside it.
async function entryFiles(entry, found) {
  if (entry.isFile) {
    const file = await new Promise((resolve, reject) => entry.file(resolve, reject));
    found.push([file, entry.fullPath.replace(/^\//, "")]);
    return;
  }
  const reader = entry.createReader();
  for (;;) {
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!batch.length) return;
    for (const child of batch) await entryFiles(child, found);
  }
}

function showPending() {
  const list = $("pending");
  for (let i = 0; i < localStorage.length; i += 1) {
    const key = localStorage.key(i);
    if (!key.startsWith(STORE_PREFIX)) continue;
    const saved = JSON.parse(localStorage.getItem(key));
    const row = document.createElement("li");
    row.className = "pending";
    row.dataset.key = key;
    row.textContent = `${saved.name} was not finished: choose it again to resume`;
    list.append(row);
  }
}

function wireUploads() {
  const drop = $("drop");
  if (!drop) return;
  showPending();
  const chosen = (input) => {
    const files = [...input.files].map((file) => [file, file.webkitRelativePath || file.name]);
    input.value = "";
    uploadAll(files);
  };
  $("files").addEventListener("change", (event) => chosen(event.target));
  $("folder").addEventListener("change", (event) => chosen(event.target));
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", async (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    // The items are readable only while the event is handled: their entries are taken before any await.
    const dropped = [...event.dataTransfer.items]
      .filter((item) => item.kind === "file")
      .map((item) => [item.webkitGetAsEntry?.(), item.getAsFile()]);
    const found = [];
    for (const [entry, file] of dropped) {
      if (entry) await entryFiles(entry, found);
      else if (file) found.push([file, file.name]);
    }
    uploadAll(found);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  wireCopyButtons();
  wirePreview();
  wireUploads();
});
