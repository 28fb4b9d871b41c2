// Command etcd wraps etcdmain so that etcd can be built from the Go module proxy
// (the etcd module's own replace lines make "go install" refuse it).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
