package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClusterEndpoint(t *testing.T) {
	type member struct {
		Name  string `json:"name"`
		State string `json:"state"`
	}
	status := struct {
		Self    string   `json:"self"`
		Nodes   int      `json:"nodes"`
		Members []member `json:"members"`
	}{"n1", 2, []member{{"n1", "alive"}, {"n2", "alive"}}}

	tests := []struct {
		name       string
		cluster    func() any
		method     string
		wantStatus int
		wantBody   string
	}{
		{"alone", nil, "GET", 404, `{"error":"not running in cluster mode (start limiterd with -bind-addr or -join)"}` + "\n"},
		{"status", func() any { return status }, "GET", 200,
			`{"self":"n1","nodes":2,"members":[{"name":"n1","state":"alive"},{"name":"n2","state":"alive"}]}` + "\n"},
		{"HEAD", func() any { return status }, "HEAD", 200, ""},
		{"POST", func() any { return status }, "POST", 405, `{"error":"method POST not allowed; use GET or HEAD"}` + "\n"},
		{"not encodable", func() any { return make(chan int) }, "GET", 500, `{"error":"cannot encode the cluster status"}` + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Cluster = tc.cluster
			a, _ := newAPI(t, cfg, &recorder{}, nil)
			rec := serve(a, httptest.NewRequest(tc.method, "/cluster", nil))
			if rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			if tc.method != "HEAD" && rec.Body.String() != tc.wantBody {
				t.Errorf("body %q, want %q", rec.Body, tc.wantBody)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if rec.Code == http.StatusOK && !strings.Contains(rec.Header().Get("Cache-Control"), "no-store") {
				t.Errorf("Cache-Control %q", rec.Header().Get("Cache-Control"))
			}
		})
	}
}
