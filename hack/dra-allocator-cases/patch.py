"""Wire dump.go into a writable copy of k8s.io/dynamic-resource-allocation@v0.37.2.

RunTestAllocator records each case (its inputs, and the incubating allocator's own results, error
and search-step count) right after upstream's Allocate call; TestAllocator and
TestLexicographicalAllocator write the file named by $DRA_DUMP when their tables are done.
"""

import sys
from pathlib import Path

root = Path(sys.argv[1]) / "structured/internal/allocatortesting"
testing = root / "allocator_testing.go"
text = testing.read_text()
text = text.replace(
    '\t\t\t\tt.Skipf("SKIP: required feature(s) %v not supported by allocator", sets.List(missing))',
    "\t\t\t\tdumpCase(name, tc, sets.List(missing), nil, nil, 0)\n"
    '\t\t\t\tt.Skipf("SKIP: required feature(s) %v not supported by allocator", sets.List(missing))',
)
text = text.replace(
    "\t\t\tresults, err := allocator.Allocate(ctx, tc.node, unwrap(claimsToAllocate...))\n",
    """\t\t\tresults, err := allocator.Allocate(ctx, tc.node, unwrap(claimsToAllocate...))
\t\t\t{
\t\t\t\tvar n int64
\t\t\t\tif ext, ok := allocator.(internal.AllocatorExtended); ok {
\t\t\t\t\tn = ext.GetStats().NumAllocateOneInvocations
\t\t\t\t}
\t\t\t\tvar fixed []resourceapi.AllocationResult
\t\t\t\tif results != nil {
\t\t\t\t\tfixed = make([]resourceapi.AllocationResult, len(results))
\t\t\t\t\tfor i := range results {
\t\t\t\t\t\tfixed[i] = *results[i].DeepCopy()
\t\t\t\t\t\tfor j := range fixed[i].Devices.Results {
\t\t\t\t\t\t\tif fixed[i].Devices.Results[j].ShareID != nil {
\t\t\t\t\t\t\t\tfixed[i].Devices.Results[j].ShareID = &fixedShareID
\t\t\t\t\t\t\t}
\t\t\t\t\t\t}
\t\t\t\t\t}
\t\t\t\t}
\t\t\t\tdumpCase(name, tc, nil, fixed, err, n)
\t\t\t}
""",
)
text = text.replace(
    '\tRunTestAllocator(t, supportedFeatures, newAllocator, testcases)\n\n\tt.Run("interrupt"',
    '\tRunTestAllocator(t, supportedFeatures, newAllocator, testcases)\n\twriteDump()\n\n\tt.Run("interrupt"',
)
assert text.count("dumpCase(") == 2 and "writeDump()" in text, "upstream's test runner changed: update patch.py"
testing.write_text(text)
lexi = root / "lexicographical_testing.go"
text = lexi.read_text()
text = text.replace(
    "\tRunTestAllocator(t, supportedFeatures, newAllocator, testcases)\n}",
    "\tRunTestAllocator(t, supportedFeatures, newAllocator, testcases)\n\twriteDump()\n}",
)
assert "writeDump()" in text
lexi.write_text(text)
(root / "dump.go").write_text((Path(__file__).parent / "dump.go.txt").read_text())
