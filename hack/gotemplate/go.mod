module secondary-scheduler/hack/gotemplate

go 1.26
