"""A Kubernetes `grpc:` probe as the kubelet runs it: a plaintext call of
the standard gRPC health service (grpc.health.v1.Health/Check), here with
gRPC's own Python health client (grpcio-health-checking, installed into
target/venv-k8s by scripts/install.sh). The probe succeeds only when the
answer is SERVING.

Must not: speak TLS (the kubelet's gRPC probes do not) or treat anything
but SERVING as success.
"""


def grpc_health(port, service="", timeout=3.0):
    """(200, "grpc SERVING") when 127.0.0.1:port says SERVING for
    `service`; else (503, the status) or (None, the call's error)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            r = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as e:
            return (None, f"grpc {e.code().name}: {e.details()}")
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)
    return (200 if name == "SERVING" else 503, f"grpc {name}")
