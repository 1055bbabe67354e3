"""An OTLP/HTTP trace endpoint for tests/otlp.rs: decodes each POST /v1/traces body with the
official OpenTelemetry protobuf definitions (opentelemetry-proto) and appends every span to a
JSON lines file. Usage: collector.py SPANS_FILE PORT_FILE; it listens on a free loopback port,
written to PORT_FILE once it is listening, and stops when its stdin closes."""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS_FILE, PORT_FILE = sys.argv[1], sys.argv[2]
LOCK = threading.Lock()


class Collector(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_response(400)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for resource_spans in request.resource_spans:
            resource = MessageToDict(resource_spans.resource, preserving_proto_field_name=True)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    decoded = MessageToDict(span, preserving_proto_field_name=True)
                    # Ids as the hex W3C Trace Context writes, not protobuf JSON's base64.
                    decoded["trace_id"] = span.trace_id.hex()
                    decoded["span_id"] = span.span_id.hex()
                    decoded["parent_span_id"] = span.parent_span_id.hex()
                    decoded["resource"] = resource
                    decoded["scope"] = scope_spans.scope.name
                    decoded["header"] = self.headers.get("x-test-header", "")
                    lines.append(json.dumps(decoded))
        with LOCK, open(SPANS_FILE, "a") as spans:
            for line in lines:
                spans.write(line + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *arguments):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
threading.Thread(target=server.serve_forever, daemon=True).start()
with open(PORT_FILE + ".partial", "w") as port:
    port.write(str(server.server_address[1]))
import os

os.rename(PORT_FILE + ".partial", PORT_FILE)
sys.stdin.read()
server.shutdown()
