"""Chunked uploads: ``/v1/uploads`` (create, put chunks in any order, status, complete, abort)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request, Response
from fastapi import Path as PathParam

from blobstore import direct_uploads
from blobstore.api.body import declared_length, json_body_openapi, raw_body_openapi, read_json
from blobstore.api.deps import BaseUrlDep, CallerDep, ServiceDep, SettingsDep
from blobstore.api.headers import CHUNK_XXH3, CONTENT_DIGEST, parse_content_digest, parse_xxh3_header
from blobstore.api.schemas import (
    ArtifactOut,
    ChunkOut,
    CompleteUploadRequest,
    CreateUploadRequest,
    DirectPartsOut,
    DirectPartsRequest,
    UploadOut,
    UploadStatusOut,
    artifact_out,
    direct_parts_out,
    upload_out,
    upload_status_out,
)
from blobstore.errors import ChunkSizeInvalid, NotFound
from blobstore.models import UploadState

router = APIRouter(prefix="/v1/uploads", tags=["uploads"])

ChunkIndex = Annotated[int, PathParam(ge=0, description="0-based chunk index")]


@router.post(
    "",
    status_code=201,
    response_model=UploadOut,
    openapi_extra=json_body_openapi(CreateUploadRequest),
    summary="Begin a chunked upload",
)
async def create_upload(
    request: Request, response: Response, service: ServiceDep, settings: SettingsDep, caller: CallerDep
) -> UploadOut:
    body = await read_json(request, CreateUploadRequest, settings.max_json_body)
    session = await service.uploads.begin(
        caller,
        name=body.name,
        mime_type=body.mime_type,
        size=body.size,
        sha256=body.sha256,
        chunk_size=body.chunk_size,
        ttl_seconds=body.ttl_seconds,
        metadata=body.metadata,
        direct=body.direct,
    )
    response.headers["location"] = f"/v1/uploads/{session.id}"
    out = upload_out(session, settings)
    out.direct_offered = direct_uploads.direct_store(settings, service.blobs) is not None
    if out.direct:
        offer = await direct_uploads.offer(settings, service.blobs, session, service.clock())
        out.direct_parts = direct_parts_out(offer)
    return out


@router.post(
    "/{upload_id}/parts",
    response_model=DirectPartsOut,
    openapi_extra=json_body_openapi(DirectPartsRequest, required=False),
    summary="Fresh presigned part URLs of a direct upload",
)
async def direct_parts(
    request: Request, upload_id: str, service: ServiceDep, settings: SettingsDep, caller: CallerDep
) -> DirectPartsOut:
    body = await read_json(request, DirectPartsRequest, settings.max_json_body, optional=True)
    session = await service.uploads.open_session(caller, upload_id)
    offer = await direct_uploads.offer(settings, service.blobs, session, service.clock(), body.part_numbers)
    return direct_parts_out(offer)


@router.put(
    "/{upload_id}/chunks/{index}",
    response_model=ChunkOut,
    openapi_extra=raw_body_openapi("The chunk's bytes: [index*chunk_size, (index+1)*chunk_size)"),
    summary="Upload one chunk (any order, idempotent for the same bytes)",
)
async def put_chunk(
    request: Request, upload_id: str, index: ChunkIndex, service: ServiceDep, caller: CallerDep
) -> ChunkOut:
    digest_header = request.headers.get(CONTENT_DIGEST)
    xxh3_header = request.headers.get(CHUNK_XXH3)
    sha256 = parse_content_digest(digest_header) if digest_header is not None else None
    xxh3 = parse_xxh3_header(xxh3_header) if xxh3_header is not None else None
    session = await service.uploads.open_session(caller, upload_id)
    length = declared_length(request)
    if length is not None and length > session.chunk_size:
        # Refuse before reading a byte of an oversized body.
        raise ChunkSizeInvalid(
            f"a chunk is at most {session.chunk_size} bytes", max_length=session.chunk_size
        )
    record = await service.uploads.put_chunk(
        caller, upload_id, index, request.stream(), sha256=sha256, xxh3=xxh3
    )
    return ChunkOut(
        upload_id=record.upload_id,
        index=record.index,
        size=record.size,
        sha256=record.sha256,
        xxh3=record.xxh3,
    )


@router.get(
    "/{upload_id}", response_model=UploadStatusOut, summary="Upload state, received and missing chunks"
)
async def get_upload(
    upload_id: str, service: ServiceDep, settings: SettingsDep, caller: CallerDep
) -> UploadStatusOut:
    status = await service.uploads.status(caller, upload_id)
    if status.session.state is UploadState.ABORTED:
        # Aborting is the upload's DELETE: afterwards it is gone, like any unknown upload.
        raise NotFound()
    return upload_status_out(status, settings)


@router.post(
    "/{upload_id}/complete",
    status_code=201,
    response_model=ArtifactOut,
    openapi_extra=json_body_openapi(CompleteUploadRequest, required=False),
    summary="Verify the chunks, store the blob and create the artifact",
)
async def complete_upload(
    request: Request,
    response: Response,
    upload_id: str,
    service: ServiceDep,
    settings: SettingsDep,
    caller: CallerDep,
    base: BaseUrlDep,
) -> ArtifactOut:
    body = await read_json(request, CompleteUploadRequest, settings.max_json_body, optional=True)
    etags = {part.part_number: part.etag for part in body.parts} if body.parts else None
    artifact = await service.uploads.complete(caller, upload_id, sha256=body.sha256, part_etags=etags)
    response.headers["location"] = f"/v1/artifacts/{artifact.id}"
    return artifact_out(artifact, base)


@router.delete("/{upload_id}", status_code=204, summary="Abort the upload and free its staged chunks")
async def abort_upload(upload_id: str, service: ServiceDep, caller: CallerDep) -> Response:
    await service.uploads.abort(caller, upload_id)
    return Response(status_code=204)
