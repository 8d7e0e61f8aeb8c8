"""``http::fetch`` publishes what the gate's flow rules read: its output is anyone's, a request is
seen outside, and ``url`` is where data goes."""

from __future__ import annotations

from tackroom.contracts.tools import traits_of
from tackroom.engine import open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.http.worker import WORKER


async def test_fetch_declares_untrusted_output_an_external_effect_and_its_sink() -> None:
    config = HarnessConfig(schema_version=1)
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config) as host:
        infos = {info.function_id: info for info in await host.engine.list_functions()}
    traits = traits_of(infos["http::fetch"].request_schema)
    assert traits.untrusted_output
    assert (traits.side_effect, traits.effect, traits.sinks) == ("external", "external", ["url"])
