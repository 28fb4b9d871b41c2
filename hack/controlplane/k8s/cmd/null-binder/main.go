// Command null-binder is the benchmarks' floor for a scheduler: it binds every unassigned pod
// with its schedulerName to the next node round-robin through the Binding subresource, with no
// filtering or scoring at all, so its throughput is what this apiserver on this machine allows.
//
// An informer watches the unassigned pods with --scheduler-name (a server-side field selector)
// and another the nodes; --workers goroutines take pod keys off a rate-limited work queue and
// bind them with a client at --qps/--burst. "null-binder ready" is logged once both caches have
// synced. A bind that fails is retried with the queue's backoff; a 409 (already bound) or a
// pod that is gone is dropped.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// nodeRing is the current node names in name order and the round-robin cursor over them.
type nodeRing struct {
	mu    sync.RWMutex
	names []string
	next  atomic.Uint64
}

func (r *nodeRing) set(names []string) {
	sort.Strings(names)
	r.mu.Lock()
	r.names = names
	r.mu.Unlock()
}

func (r *nodeRing) pick() (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.names) == 0 {
		return "", false
	}
	i := r.next.Add(1) - 1
	return r.names[i%uint64(len(r.names))], true
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	schedulerName := flag.String("scheduler-name", "null-binder", "spec.schedulerName of the pods to bind")
	workers := flag.Int("workers", 16, "concurrent binds")
	qps := flag.Float64("qps", 5000, "client QPS")
	burst := flag.Int("burst", 5000, "client burst")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "null-binder: %v\n", err)
		os.Exit(2)
	}
	config.QPS = float32(*qps)
	config.Burst = *burst
	config.UserAgent = "null-binder"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "null-binder: %v\n", err)
		os.Exit(2)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	unassigned := fields.AndSelectors(
		fields.OneTermEqualSelector("spec.schedulerName", *schedulerName),
		fields.OneTermEqualSelector("spec.nodeName", ""),
	).String()
	podFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = unassigned }))
	nodeFactory := informers.NewSharedInformerFactory(client, 0)
	podInformer := podFactory.Core().V1().Pods()
	nodeInformer := nodeFactory.Core().V1().Nodes()

	queue := workqueue.NewTypedRateLimitingQueue[string](workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue})

	ring := &nodeRing{}
	refreshNodes := func(any) {
		nodes, err := nodeInformer.Lister().List(labels.Everything())
		if err != nil {
			return
		}
		names := make([]string, 0, len(nodes))
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		ring.set(names)
	}
	_, _ = nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    refreshNodes,
		DeleteFunc: refreshNodes,
	})

	podFactory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	podFactory.WaitForCacheSync(ctx.Done())
	nodeFactory.WaitForCacheSync(ctx.Done())
	refreshNodes(nil)
	fmt.Printf("null-binder ready: %d nodes, %d workers, qps %.0f\n", len(ring.names), *workers, *qps)

	var bound atomic.Int64
	bind := func(key string) error {
		namespace, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return nil
		}
		pod, err := podInformer.Lister().Pods(namespace).Get(name)
		if err != nil {
			return nil // bound or deleted since it was queued: the field selector dropped it
		}
		node, ok := ring.pick()
		if !ok {
			return fmt.Errorf("no nodes")
		}
		binding := &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: pod.UID},
			Target:     v1.ObjectReference{Kind: "Node", Name: node},
		}
		err = client.CoreV1().Pods(namespace).Bind(ctx, binding, metav1.CreateOptions{})
		if err == nil {
			bound.Add(1)
			return nil
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}

	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := bind(key); err != nil {
					fmt.Fprintf(os.Stderr, "null-binder: bind %s: %v\n", key, err)
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}

	<-ctx.Done()
	queue.ShutDown()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	fmt.Printf("null-binder stopped: %d pods bound\n", bound.Load())
}
