"""OpenTelemetry traces for trio-agent (the ``otel`` extra: ``pip install trio-agent[otel]``).

* :class:`OtelTracing` - the plugin: ``invoke_agent``, ``chat`` and ``execute_tool`` spans
  following the GenAI semantic conventions, sent to the application's global
  ``TracerProvider``; config ``otel: {capture_content: false}``.

Importing this package imports ``opentelemetry``; nothing else in trio-agent does.
"""

from ._plugin import OtelTracing as OtelTracing

__all__ = ["OtelTracing"]
