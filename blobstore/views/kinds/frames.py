"""Frames of a video, one for each scene (at its cuts) or evenly spaced keyframes, as JPEG images or one
contact sheet.

``read_artifact(uri, frames=6, frames_mode="scenes"|"even", frames_layout="frames"|"sheet")``;
``GET /v1/artifacts/{id}/frames?mode=`` (their times and image URLs) and ``/frames/{index}.jpg?mode=``.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from blobstore.errors import InvalidRequest, MediaInvalid, NotFound
from blobstore.tokens import estimate_image_tokens, estimate_text_tokens
from blobstore.views.describe import seconds
from blobstore.views.engines import av, pillow, scenes
from blobstore.views.kind import (
    MAX_EDGE_ARGUMENT,
    MAX_EDGE_QUERY,
    REQUIRED,
    Answer,
    Argument,
    Budget,
    Decoded,
    Engine,
    Inline,
    Item,
    Listing,
    Payload,
    Route,
    Source,
    Text,
    Values,
    View,
    ViewKind,
)
from blobstore.views.params import MAX_FRAMES, FramesLayout, FramesMode, check_edge, check_frames
from blobstore.views.progress import step

if TYPE_CHECKING:
    from blobstore.models import Caller

SOURCES: Final = ("video",)
DEFAULT_EDGE: Final = 768
"""Frames are smaller than pages by default (at most the long-edge budget)."""

# -- jobs, in the worker ----------------------------------------------------------------------------------


def video_frames(path: str, count: int, max_edge: int, layout: str) -> Decoded:
    """``count`` keyframes as JPEG images at most ``max_edge`` on their longer side, or one contact sheet."""
    frames: list[tuple[float, Any]] = []
    for t, image in av.keyframes(path, count):
        frames.append((t, pillow.fit(image, max_edge)))
        step(len(frames), count, f"{len(frames)} of {count} keyframes extracted")
    times = [round(t, 3) for t, _ in frames]
    if layout == "sheet":
        # A video with fewer keyframes than times lands on one keyframe for several: a sheet shows it once.
        frames = [frame for i, frame in enumerate(frames) if i == 0 or times[i] != times[i - 1]]
        times = list(dict.fromkeys(times))
        sheet, columns = pillow.contact_sheet([image for _, image in frames], max_edge)
        meta = {"times": times, "width": sheet.width, "height": sheet.height, "columns": columns}
        return Decoded(meta={"times": times}, parts=[(meta, pillow.jpeg(sheet))])
    parts = [
        ({"index": i, "time_seconds": t, "width": image.width, "height": image.height}, pillow.jpeg(image))
        for i, (t, image) in enumerate(zip(times, (image for _, image in frames), strict=True))
    ]
    return Decoded(meta={"times": times}, parts=parts)


SCENE_PIXELS: Final = 1_500_000_000
"""Decoded pixels a scene search may spend comparing every frame: about 10 s of decoding on two cores (150
million pixels a second, bench/views.py), so 24 s of 1080p or 54 s of 720p at 30 frames a second. A longer or
larger video is compared keyframe by keyframe."""
SCENE_FRAMES: Final = 15_000
"""Frames a scene search compares one by one at most, however small they are."""
SCENE_SAMPLES: Final = 400
"""Keyframes compared at most when a video is too long to compare every frame (a seek and a decode each)."""
LISTED_SCENES: Final = 100
"""Scene starts an answer lists at most; the count is always whole."""
SETTLE_SECONDS: Final = 0.5
"""A scene is shown by its frame this long after its start (or its last, if it is shorter): the first frame
after a cut is often still a blend of the two."""


@dataclass(slots=True)
class _Scene:
    start: float
    end: float
    shown: float
    """The time of ``frame``, the one that shows the scene."""
    frame: Any


def video_scenes(path: str, count: int, max_edge: int, layout: str) -> Decoded:
    """The video's scenes (:mod:`~blobstore.views.engines.scenes`) and a frame of each of the ``count``
    longest (in time order), as JPEG images at most ``max_edge`` on their longer side, or one contact sheet.
    Every frame is compared while the video is within :data:`SCENE_PIXELS` and :data:`SCENE_FRAMES`, else
    :data:`SCENE_SAMPLES` keyframes spread over it."""
    facts = av.video_facts(path)
    total = float(facts["duration_seconds"])
    rate = float(facts.get("frame_rate") or 30.0)
    frames_in = total * rate
    every = frames_in <= SCENE_FRAMES and frames_in * facts["width"] * facts["height"] <= SCENE_PIXELS
    if every:
        source = av.every_frame(path)
    else:
        source = av.keyframes_near(path, [total * (i + 0.5) / SCENE_SAMPLES for i in range(SCENE_SAMPLES)])
    log = _SceneLog(count)
    finder = scenes.CutFinder(adaptive=every)
    thumbnail = av.Thumbnails(scenes.THUMB_WIDTH)
    for time, frame in source:
        log.waiting.append((time, frame))
        log.judged(finder.add(time, thumbnail(frame)))
        step(round(time, 3), total, f"scenes searched to {time:.1f} s of {total:.1f} s")
    log.judged(finder.finish())
    kept = log.close(total)
    starts = log.starts
    chosen = sorted(kept, key=lambda scene: scene.start)
    images = [(scene, pillow.fit(av.picture(scene.frame), max_edge)) for scene in chosen]
    listed = [round(start, 3) for start in starts[:LISTED_SCENES]]
    meta = {
        "scenes": len(starts),
        "scene_starts": listed,
        "compared": "every frame" if every else "keyframes",
        "times": [round(scene.start, 3) for scene in chosen],
    }
    # Each part carries the summary too: a cached part is all a later answer reads.
    summary = {key: meta[key] for key in ("scenes", "scene_starts", "compared")}
    if layout == "sheet":
        sheet, columns = pillow.contact_sheet([image for _, image in images], max_edge)
        sheet_meta = {
            "times": meta["times"],
            "width": sheet.width,
            "height": sheet.height,
            "columns": columns,
        }
        return Decoded(meta=meta, parts=[({**sheet_meta, **summary}, pillow.jpeg(sheet))])
    parts = [
        (
            {
                "index": i,
                "time_seconds": round(scene.shown, 3),
                "scene_start_seconds": round(scene.start, 3),
                "scene_end_seconds": round(scene.end, 3),
                "width": image.width,
                "height": image.height,
                **summary,
            },
            pillow.jpeg(image),
        )
        for i, (scene, image) in enumerate(images)
    ]
    return Decoded(meta=meta, parts=parts)


class _SceneLog:
    """The scenes found so far: every start, and the frames of the ``count`` longest (only theirs are held,
    however many scenes there are). Frames wait in :attr:`waiting` until the cut finder judges them."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.starts: list[float] = []
        self.kept: list[_Scene] = []
        self.current: _Scene | None = None
        self.waiting: deque[tuple[float, Any]] = deque()

    def judged(self, verdicts: list[tuple[float, bool]]) -> None:
        for time, cut in verdicts:
            _, frame = self.waiting.popleft()
            if cut or self.current is None:
                self.starts.append(time)
                if self.current is not None:
                    self.current.end = time
                    self._keep(self.current)
                self.current = _Scene(time, time, time, frame)
            elif time - self.current.start <= SETTLE_SECONDS:
                self.current.shown, self.current.frame = time, frame

    def close(self, total: float) -> list[_Scene]:
        if self.current is None:
            raise MediaInvalid("no frame of the video could be decoded")
        self.current.end = max(total, self.current.start)
        self._keep(self.current)
        return self.kept

    def _keep(self, scene: _Scene) -> None:
        length = round(scene.end - scene.start, 3)
        if len(self.kept) >= self.count and length <= round(self.kept[-1].end - self.kept[-1].start, 3):
            return  # no longer than the shortest kept (and later): its frame is let go at once
        found = [*self.kept, scene]
        # The longest first, the earlier of two as long.
        self.kept = sorted(found, key=lambda one: (-round(one.end - one.start, 3), one.start))[: self.count]


# -- views, cached ----------------------------------------------------------------------------------------


async def frames(
    views: Engine, source: Source, count: int, *, max_edge: int | None = None, layout: FramesLayout = "frames"
) -> list[View]:
    """``count`` evenly spaced keyframes as JPEG (meta: index, time_seconds, size), or one sheet."""
    count = check_frames(count)
    edge = check_edge(max_edge or min(views.default_edge, DEFAULT_EDGE))
    base = {"op": "frames", "count": count, "max_edge": edge, "layout": layout}
    indexes = [0] if layout == "sheet" else list(range(count))

    async def compute(missing: list[int]) -> list[View]:
        decoded = await views.decode(source, "video_frames", count=count, max_edge=edge, layout=layout)
        made = [View(data=data, mime_type="image/jpeg", meta=meta) for meta, data in decoded.parts]
        return [made[i] for i in missing]

    return await views.many(source, [{**base, "index": i} for i in indexes], compute)


async def scene_frames(
    views: Engine, source: Source, count: int, *, max_edge: int | None = None, layout: FramesLayout = "frames"
) -> list[View]:
    """A frame of each of the ``count`` longest scenes, in time order, as JPEG (meta: index,
    time_seconds, scene_start_seconds, scene_end_seconds, size, and the whole video's ``scenes`` count,
    ``scene_starts`` and how they were ``compared``), or one sheet of them. Fewer than ``count`` when the
    video has fewer scenes. The frames are cached one by one, beside an index that says how many."""
    count = check_frames(count)
    edge = check_edge(max_edge or min(views.default_edge, DEFAULT_EDGE))
    base = {"op": "scenes", "count": count, "max_edge": edge, "layout": layout}
    made: list[View] = []

    async def decode() -> None:
        decoded = await views.decode(source, "video_scenes", count=count, max_edge=edge, layout=layout)
        made[:] = [View(data=data, mime_type="image/jpeg", meta=meta) for meta, data in decoded.parts]

    async def compute_index() -> View:
        await decode()
        meta = {"parts": len(made)}
        return View(data=json.dumps(meta).encode(), mime_type="application/json", meta=meta)

    async def compute_parts(missing: list[int]) -> list[View]:
        if not made:  # a frame trimmed from the cache while its index stayed: decode them again
            await decode()
        return [made[i] for i in missing]

    index = await views.one(source, {**base, "index": "all"}, compute_index)
    wanted = [{**base, "index": i} for i in range(int(index.meta["parts"]))]
    return await views.many(source, wanted, compute_parts)


def distinct_frames(frames: list[View]) -> list[View]:
    """The keyframes of a ``frames`` view, each once (the first of several at the same time): evenly spaced
    times of a video with fewer keyframes land on one keyframe for several."""
    seen: set[float] = set()
    out: list[View] = []
    for view in frames:
        time = view.meta.get("time_seconds")
        if time is not None:
            if time in seen:
                continue
            seen.add(time)
        out.append(view)
    return out


# -- read_artifact ----------------------------------------------------------------------------------------


async def answer(views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget) -> Answer:
    if values["frames_mode"] == "scenes":
        return await _scenes_answer(views, caller, artifact_id, values, budget)
    asked: int = values["frames"]
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    facts = await views.facts(source)
    made = await frames(views, source, asked, max_edge=values["max_edge"], layout=values["frames_layout"])
    name = source.artifact.name
    # Evenly spaced times of a video with fewer keyframes land on one keyframe for several: each is shown
    # once, so an answer never spends tokens on the same picture twice.
    made = distinct_frames(made)
    found = sum(len(view.meta.get("times") or [view.meta["time_seconds"]]) for view in made)
    items: list[Item] = []
    tokens = 0
    for view in made:
        times = view.meta.get("times") or [view.meta["time_seconds"]]
        label = ", ".join(f"{seconds(float(t))} s" for t in times)
        if not budget.take(view.data):
            items.append(Text(f"(frame at {label} left out: over this answer's inline budget)"))
            continue
        items.append(Text(f"keyframe at {label}" if len(times) == 1 else f"sheet of {label}"))
        items.append(Inline(view.data, view.mime_type))
        tokens += estimate_image_tokens(view.meta["width"], view.meta["height"])
    total = float(facts.get("duration_seconds", 0.0))
    size = f"{facts.get('width')}x{facts.get('height')}"
    fewer = f" ({asked} asked: the video has no other keyframes near those times)" if found < asked else ""
    head = (
        f"{name}, {found} keyframe{'s' if found != 1 else ''} of {seconds(total)} s "
        f"({size}){fewer}; about {tokens} tokens."
    )
    tail = _hear(facts) + (
        f"Other moments: read_artifact(uri, frames=N) with up to {MAX_FRAMES} frames, "
        'or frames_layout="sheet".'
    )
    facts_out = {
        "kind": "frames",
        "mode": "even",
        "times": [view.meta.get("times") or view.meta["time_seconds"] for view in made],
        "duration_seconds": total,
        "estimated_tokens": tokens,
    }
    return Answer(head, items, tail, facts_out)


def _hear(facts: dict[str, Any]) -> str:
    return "Hear it with read_artifact(uri, start_seconds=0). " if facts.get("has_audio") else ""


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def scenes_line(name: str, facts: dict[str, Any], found: dict[str, Any]) -> str:
    """``clip.mp4, 3 scenes in 6.0 s (320x240), starting at 0.0, 2.0 and 4.0 s``: how many scenes the
    search found and where each starts (the first :data:`LISTED_SCENES` of them)."""
    count, starts = int(found["scenes"]), [float(t) for t in found["scene_starts"]]
    listed = [seconds(t) for t in starts]
    at = listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} and {listed[-1]}"
    more = f" (the first {len(listed)} listed)" if count > len(listed) else ""
    total = float(facts.get("duration_seconds", 0.0))
    size = f"{facts.get('width')}x{facts.get('height')}"
    compared = "; compared keyframe by keyframe (a long video)" if found["compared"] == "keyframes" else ""
    scenes = _plural(count, "scene")
    return f"{name}, {scenes} in {seconds(total)} s ({size}), starting at {at} s{more}{compared}"


async def _scenes(
    views: Engine, caller: Caller, artifact_id: str, values: Values
) -> tuple[Source, dict[str, Any], list[View]]:
    source = await views.open(caller, artifact_id, kinds=SOURCES)
    facts = await views.facts(source)
    made = await scene_frames(
        views, source, values["frames"], max_edge=values["max_edge"], layout=values["frames_layout"]
    )
    return source, facts, made


async def _scenes_answer(
    views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget
) -> Answer:
    """A frame of each scene (of the longest, when there are more than asked for), in time order, or one
    sheet of them; the first line says how many scenes there are and where each starts."""
    source, facts, made = await _scenes(views, caller, artifact_id, values)
    summary = made[0].meta
    items: list[Item] = []
    tokens = 0
    for view in made:
        if "times" in view.meta:
            label = "sheet of the scenes at " + ", ".join(
                f"{seconds(float(t))} s" for t in view.meta["times"]
            )
        else:
            start, end = view.meta["scene_start_seconds"], view.meta["scene_end_seconds"]
            label = (
                f"scene {seconds(start)}-{seconds(end)} s, frame at {seconds(view.meta['time_seconds'])} s"
            )
        if not budget.take(view.data):
            items.append(Text(f"({label} left out: over this answer's inline budget)"))
            continue
        items.append(Text(label))
        items.append(Inline(view.data, view.mime_type))
        tokens += estimate_image_tokens(view.meta["width"], view.meta["height"])
    shown = len(made[0].meta["times"]) if "times" in made[0].meta else len(made)
    count = int(summary["scenes"])
    which = "each" if shown == count else f"each of the {shown} longest"
    how = "in one sheet" if "times" in made[0].meta else "one frame a scene"
    head = (
        f"{scenes_line(source.artifact.name, facts, summary)}; {which} shown, {how}; about {tokens} tokens."
    )
    tail = _hear(facts) + (
        f'Other frames: read_artifact(uri, frames=N) with up to {MAX_FRAMES}, frames_mode="even" for evenly '
        'spaced keyframes, or frames_layout="sheet".'
    )
    facts_out = {
        "kind": "frames",
        "mode": "scenes",
        "scenes": count,
        "scene_starts": summary["scene_starts"],
        "compared": summary["compared"],
        "times": [view.meta.get("times") or view.meta["time_seconds"] for view in made],
        "duration_seconds": float(facts.get("duration_seconds", 0.0)),
        "estimated_tokens": tokens,
    }
    return Answer(head, items, tail, facts_out)


async def text_answer(
    views: Engine, caller: Caller, artifact_id: str, values: Values, budget: Budget
) -> Answer:
    """A video's frames in text alone (``include_media=false``): its scene list, each scene's start, end and
    length, the longest marked."""
    if values["frames_mode"] != "scenes":
        raise InvalidRequest(
            'frames_mode="even" asks for pictures and include_media=false for none: a video\'s frames in '
            'text are its scene list (frames_mode="scenes")'
        )
    source, facts, made = await _scenes(views, caller, artifact_id, values)
    summary = made[0].meta
    total = float(facts.get("duration_seconds", 0.0))
    starts = [float(t) for t in summary["scene_starts"]]
    count = int(summary["scenes"])
    ends = [*starts[1:], total] if count == len(starts) else starts[1:]
    longest = (
        {float(t) for t in made[0].meta["times"]}
        if "times" in made[0].meta
        else {float(view.meta["scene_start_seconds"]) for view in made}
    )
    # The scenes frames=N shows are marked, when it shows only some of them.
    marked = longest if len(longest) < count else set()
    lines = [
        f"scene {i}: {seconds(start)}-{seconds(end)} s ({seconds(end - start)} s)"
        + (" *" if start in marked else "")
        for i, (start, end) in enumerate(zip(starts, ends, strict=False), start=1)
    ]
    if len(lines) < count:
        lines.append(f"(and {count - len(lines)} more scenes from {seconds(starts[len(lines)])} s)")
    text = "\n".join(lines)
    tokens = estimate_text_tokens(text)
    shown = f", the {len(marked)} longest (frames={values['frames']} shows them) marked *" if marked else ""
    head = (
        f"{scenes_line(source.artifact.name, facts, summary)}; the scene list as text "
        f"(include_media=false){shown}; about {tokens} tokens."
    )
    tail = (
        "See the scenes with read_artifact(uri, frames=N); hear one with "
        "read_artifact(uri, start_seconds=S, duration_seconds=D)."
        if facts.get("has_audio")
        else "See the scenes with read_artifact(uri, frames=N)."
    )
    facts_out = {
        "kind": "frames",
        "mode": "scenes",
        "scenes": count,
        "scene_starts": summary["scene_starts"],
        "compared": summary["compared"],
        "duration_seconds": total,
        "estimated_tokens": tokens,
    }
    return Answer(head, [Text(text)], tail, facts_out)


# -- HTTP -------------------------------------------------------------------------------------------------

_COUNT: Final = Argument(
    "count", int, 6, "Frames: of as many scenes, or evenly spaced keyframes", {"ge": 1, "le": MAX_FRAMES}
)
_MODE: Final = Argument("mode", FramesMode, "scenes", "A frame of each scene (at its cuts), or evenly spaced")
_SUMMARY: Final = ("scenes", "scene_starts", "compared")
"""What each frame of a scene search carries of the whole video's: the listing states it once."""


async def _made(views: Engine, source: Source, values: Values) -> list[View]:
    count, max_edge = check_frames(values["count"]), values["max_edge"]
    if values["mode"] == "scenes":
        return await scene_frames(views, source, count, max_edge=max_edge)
    return await frames(views, source, count, max_edge=max_edge)


async def _listing(views: Engine, source: Source, values: Values) -> Listing:
    count, max_edge, mode = values["count"], values["max_edge"], values["mode"]
    facts = await views.facts(source)
    made = distinct_frames(await _made(views, source, values))
    edge = f"&max_edge={max_edge}" if max_edge is not None else ""
    where = f"{values['base']}/v1/artifacts/{source.artifact.id}/frames"
    items = [
        {
            **{key: value for key, value in view.meta.items() if key not in _SUMMARY},
            "url": f"{where}/{view.meta['index']}.jpg?count={count}{edge}&mode={mode}",
        }
        for view in made
    ]
    found = {key: made[0].meta[key] for key in _SUMMARY} if mode == "scenes" else {}
    return {"artifact_id": source.artifact.id, "video": facts, "mode": mode, **found, "frames": items}


async def _frame_exists(views: Engine, source: Source, values: Values) -> None:
    if values["index"] >= values["count"]:
        raise NotFound(f"frame {values['index']} of {values['count']}: frames count from 0")
    if values["mode"] == "scenes":
        # A video of fewer scenes than asked for has fewer frames: the search (cached) says how many.
        shown = len(await _made(views, source, values))
        if values["index"] >= shown:
            raise NotFound(f"frame {values['index']}: the video has {_plural(shown, 'scene')} to show")


async def _frame(views: Engine, source: Source, values: Values) -> Payload:
    view = (await _made(views, source, values))[values["index"]]
    return Payload(view.data, view.mime_type)


def _frame_etag(values: Values) -> dict[str, Any]:
    # Evenly spaced keyframes keep the ETag they had before frames had modes: the same bytes.
    mode = {"mode": values["mode"]} if values["mode"] != "even" else {}
    return {
        "route": "frame",
        "index": values["index"],
        "count": values["count"],
        "max_edge": values["max_edge"],
        **mode,
    }


KIND: Final = ViewKind(
    name="frames",
    sources=SOURCES,
    arguments=(
        Argument(
            "frames",
            int | None,
            description=f"Video: this many frames (at most {MAX_FRAMES}): one of each scene, the longest "
            "when there are more, or evenly spaced keyframes (frames_mode).",
            bounds={"ge": 1, "le": MAX_FRAMES},
        ),
        Argument(
            "frames_layout",
            FramesLayout,
            "frames",
            description='Video: one image per frame, or all in one contact "sheet".',
        ),
        Argument(
            "frames_mode",
            FramesMode,
            "scenes",
            description="Video: a frame of each scene, found at its cuts (default; the first line lists "
            'where the scenes start), or "even": evenly spaced keyframes.',
        ),
    ),
    selectors=("frames",),
    noun="frames",
    example="frames=6",
    phrase="a video's frames at its scene cuts or evenly spaced (frames, frames_mode, frames_layout)",
    answer=answer,
    text=text_answer,
    shared=(MAX_EDGE_ARGUMENT,),
    jobs=(video_frames, video_scenes),
    routes=(
        Route(
            path="/frames",
            name="frames",
            summary="Frames of a video, one of each scene or evenly spaced: their times and image URLs",
            parameters=(_COUNT, MAX_EDGE_QUERY, _MODE),
            # The listing names its frames by absolute URL: the base it was built for is part of its identity.
            etag=lambda values: {
                "route": "frames",
                "count": values["count"],
                "max_edge": values["max_edge"],
                "base": values["base"],
                "mode": values["mode"],
            },
            answer=_listing,
            base_url=True,
        ),
        Route(
            path="/frames/{index}.jpg",
            name="frame_image",
            summary="One frame of a video (of `count`, one of each scene or evenly spaced) as JPEG",
            parameters=(
                Argument("index", int, REQUIRED, bounds={"ge": 0, "lt": MAX_FRAMES}, where="path"),
                _COUNT,
                MAX_EDGE_QUERY,
                _MODE,
            ),
            etag=_frame_etag,
            answer=_frame,
            media_type="image/jpeg",
            check=_frame_exists,
        ),
    ),
)
