"""The fake OpenAI server itself: scripting, recording, clean shutdown."""

from __future__ import annotations

import httpx
import pytest
import trio
import trio.testing

from trio_agent.testing import (
    DROP,
    HANG,
    RecordedRequest,
    SseResponse,
    assert_no_leaked_tasks,
    error_response,
    hang_response,
    json_response,
    open_fake_openai_server,
    sse_reply,
    sse_response,
    sse_text,
)


async def test_records_requests_and_serves_the_script_in_order() -> None:
    async with open_fake_openai_server(
        [json_response({"n": 1}), error_response(418, "teapot")]
    ) as server:
        assert server.remaining == 2
        async with httpx.AsyncClient() as client:
            first = await client.post(
                f"{server.base_url}/chat/completions",
                json={"model": "m"},
                headers={"X-Test": "yes"},
            )
            second = await client.post(f"{server.base_url}/other", content=b"not json")
            third = await client.get(f"{server.base_url}/models")
    assert first.status_code == 200 and first.json() == {"n": 1}
    assert second.status_code == 418 and second.json()["error"]["message"] == "teapot"
    assert (
        third.status_code == 500
        and "no scripted response left for request #3" in third.json()["error"]["message"]
    )
    a, b, c = server.requests
    assert (a.method, a.path, a.json, a.headers["x-test"]) == (
        "POST",
        "/v1/chat/completions",
        {"model": "m"},
        "yes",
    )
    assert (b.body, b.json) == (b"not json", None)
    assert c.method == "GET" and c.path == "/v1/models"
    assert all(r.finished.is_set() and not r.disconnected.is_set() for r in server.requests)


async def test_callable_responses_see_the_request() -> None:
    def echo(request: RecordedRequest) -> SseResponse:
        return sse_reply(request.json["model"])

    async with open_fake_openai_server([echo]) as server, httpx.AsyncClient() as client:
        response = await client.post(
            f"{server.base_url}/chat/completions", json={"model": "echo-me"}
        )
    assert "echo-me" in response.text and response.headers["content-type"] == "text/event-stream"


async def test_sse_body_is_chunked_and_complete() -> None:
    async with (
        open_fake_openai_server([sse_response(sse_text("a"), sse_text("b"))]) as server,
        httpx.AsyncClient() as client,
    ):
        response = await client.post(server.base_url)
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.text.count("data: ") == 2


async def test_drop_breaks_the_body() -> None:
    async with (
        open_fake_openai_server([sse_response(sse_text("a"), DROP)]) as server,
        httpx.AsyncClient() as client,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(server.base_url)


async def test_shutdown_with_requests_in_flight_leaves_no_tasks() -> None:
    with assert_no_leaked_tasks():
        async with open_fake_openai_server(
            [hang_response(), sse_response(sse_text("x"), HANG)]
        ) as server:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    async with httpx.AsyncClient() as client:
                        await client.post(server.base_url)

                nursery.start_soon(call)
                nursery.start_soon(call)
                while len(server.requests) < 2:
                    await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
            for request in server.requests:
                with trio.fail_after(5):
                    await request.disconnected.wait()


async def test_body_exceptions_propagate_unwrapped() -> None:
    with pytest.raises(KeyError, match="from the body"):
        async with open_fake_openai_server():
            raise KeyError("from the body")


async def test_outer_cancellation_propagates_as_cancelled() -> None:
    with trio.CancelScope() as scope:
        async with open_fake_openai_server():
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
