"""What out-of-tree plugin authors need to test a plugin without a cluster (kube's pkg/scheduler/testing).

- `scheduler.testing.builders`: pod and node builders (`make_pod("p").req(cpu="1").obj()`,
  `make_node("n").capacity(cpu="4").obj()`), `node_info`, `snapshot` and `make_handle`, a framework
  handle over a snapshot with the in-memory fake client.
- `scheduler.api.fake.FakeApiClient`: the in-memory fake of the ApiClient interface (bindings,
  status patches, evictions, events), for plugins that act at PreBind, Bind or PostFilter.

Small on purpose and shipped in the wheel; the control plane, fault proxy, agreement and benchmark
tooling live in the top-level `harness` package of the repository, which is not shipped.
"""
