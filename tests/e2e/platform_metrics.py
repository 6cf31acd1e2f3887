"""platform_metrics.py -- envd's GET /metrics against the guest's own /proc
(tests/e2e/envd_platform.py runs it)."""
import json

from e2e import check


def checks(vm):
    st, _, raw = vm.envd("GET", "/metrics")
    if not check("metrics: 200", st == 200, f"{st} {raw[:200]!r}"):
        return
    m = json.loads(raw)
    code, out = vm.sh("grep -c '^cpu[0-9]' /proc/stat; "
                      "awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo")
    cpus, total = (int(x) for x in out.split())
    check("metrics: cpu_count is the guest's", m["cpu_count"] == cpus,
          f"{m['cpu_count']} against {cpus}")
    check("metrics: mem_total is the guest's MemTotal", m["mem_total"] == total,
          f"{m['mem_total']} against {total}")
    check("metrics: used and cache within the total",
          0 < m["mem_used"] < m["mem_total"] and m["mem_cache"] < m["mem_total"],
          json.dumps(m))
    st, _, raw = vm.envd("GET", "/metrics", token=False)
    check("metrics: the token is needed", st == 401, f"{st}")
