package httpapi

import (
	"bytes"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
	"gopkg.in/yaml.v3"
)

const openAPIPath = "../docs/openapi.yaml"

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// openAPIDoc is the parsed docs/openapi.yaml, kept generic.
type openAPIDoc struct {
	OpenAPI    string                            `yaml:"openapi"`
	Security   []map[string][]string             `yaml:"security"`
	Paths      map[string]map[string]interface{} `yaml:"paths"`
	Components map[string]map[string]interface{} `yaml:"components"`
}

func loadOpenAPI(t *testing.T) (*openAPIDoc, interface{}) {
	t.Helper()
	data, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse %s: %v", openAPIPath, err)
	}
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0") {
		t.Fatalf("openapi = %q, want 3.0.x", doc.OpenAPI)
	}
	return &doc, raw
}

// servedRoutes lists the server's routes: "METHOD /template" for each.
func servedRoutes(t *testing.T, s *Server) []string {
	t.Helper()
	out := append([]string(nil), s.routeList...)
	sort.Strings(out)
	return out
}

// documentedRoutes lists "METHOD /path" for every operation, with the operation.
func documentedRoutes(doc *openAPIDoc) map[string]map[string]interface{} {
	out := map[string]map[string]interface{}{}
	for path, item := range doc.Paths {
		for _, m := range httpMethods {
			if op, ok := item[m].(map[string]interface{}); ok {
				out[strings.ToUpper(m)+" "+path] = op
			}
		}
	}
	return out
}

func TestOpenAPIMatchesRouter(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	e := newEnv(t)
	// Every node serves this very document.
	r := e.do("GET", "/openapi.yaml", "", nil)
	file, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	if r.Code != http.StatusOK || !bytes.Equal(r.Body, file) || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/yaml") {
		t.Fatalf("GET /openapi.yaml: %d %q, %d bytes (the file has %d)", r.Code, r.Header.Get("Content-Type"), len(r.Body), len(file))
	}
	served := servedRoutes(t, e.srv)
	if len(served) < 20 {
		t.Fatalf("walked only %d routes: %v", len(served), served)
	}
	documented := documentedRoutes(doc)
	for _, r := range served {
		if _, ok := documented[r]; !ok {
			t.Errorf("served but not documented in docs/openapi.yaml: %s", r)
		}
	}
	for r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("documented but not served: %s", r)
		}
	}
}

// TestOpenAPISecurity checks that exactly the operations documented with
// `security: []` answer without a token, and that the rest say 401.
func TestOpenAPISecurity(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	if len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Fatalf("global security = %v, want bearer", doc.Security)
	}
	if s, _ := doc.Components["securitySchemes"]["bearer"].(map[string]interface{}); s["type"] != "http" || s["scheme"] != "bearer" {
		t.Fatalf("bearer scheme = %v", s)
	}
	e := newEnv(t)
	for route, op := range documentedRoutes(doc) {
		method, path, _ := strings.Cut(route, " ")
		sec, has := op["security"]
		public := has && reflect.DeepEqual(sec, []interface{}{})
		if has && !public {
			t.Errorf("%s: unexpected security %v", route, sec)
		}
		path = strings.NewReplacer("{id}", "x").Replace(path)
		r := e.do(method, path, "", "{}")
		if public && r.Code == http.StatusUnauthorized {
			t.Errorf("%s is documented public but answers 401", route)
		}
		if !public && r.Code != http.StatusUnauthorized {
			t.Errorf("%s is documented as needing a token but answers %d without one", route, r.Code)
		}
		if !public {
			if _, ok := op["responses"].(map[string]interface{})["401"]; !ok {
				t.Errorf("%s: no 401 response documented", route)
			}
		}
	}
}

func TestOpenAPIOperations(t *testing.T) {
	doc, raw := loadOpenAPI(t)
	ids := map[string]string{}
	for route, op := range documentedRoutes(doc) {
		id, _ := op["operationId"].(string)
		if id == "" {
			t.Errorf("%s: no operationId", route)
		} else if other, dup := ids[id]; dup {
			t.Errorf("operationId %s used by %s and %s", id, route, other)
		}
		ids[id] = route
		resp, _ := op["responses"].(map[string]interface{})
		ok2xx := false
		for code := range resp {
			if strings.HasPrefix(code, "2") {
				ok2xx = true
			}
		}
		if !ok2xx {
			t.Errorf("%s: no 2xx response", route)
		}
		if strings.HasPrefix(route, "POST ") && !strings.HasPrefix(route, "POST /dlq/") {
			if _, ok := op["requestBody"]; !ok {
				t.Errorf("%s: no requestBody", route)
			}
		}
		// Path parameters are declared.
		if strings.Contains(route, "{id}") {
			_, path, _ := strings.Cut(route, " ")
			item := doc.Paths[path]
			if item["parameters"] == nil && op["parameters"] == nil {
				t.Errorf("%s: {id} is not declared as a parameter", route)
			}
		}
	}

	// Every $ref points at something that exists.
	var walk func(v interface{}, at string)
	walk = func(v interface{}, at string) {
		switch x := v.(type) {
		case map[string]interface{}:
			for k, c := range x {
				if k == "$ref" {
					ref, _ := c.(string)
					if !resolves(raw, ref) {
						t.Errorf("%s: $ref %q does not resolve", at, ref)
					}
					continue
				}
				walk(c, at+"/"+k)
			}
		case []interface{}:
			for _, c := range x {
				walk(c, at)
			}
		}
	}
	walk(raw, "#")
}

func resolves(root interface{}, ref string) bool {
	if !strings.HasPrefix(ref, "#/") {
		return false
	}
	cur := root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// jsonFields lists the JSON names of a struct's fields.
func jsonFields(v interface{}) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func schemaProps(t *testing.T, doc *openAPIDoc, name string) []string {
	t.Helper()
	s, ok := doc.Components["schemas"][name].(map[string]interface{})
	if !ok {
		t.Fatalf("no schema %s", name)
	}
	var out []string
	for k := range s["properties"].(map[string]interface{}) {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPISchemasMatchViews keeps the documented answer schemas in step
// with the structs the server encodes.
func TestOpenAPISchemasMatchViews(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	for _, c := range []struct {
		schema string
		view   interface{}
	}{
		{"Job", api.Job{}},
		{"Event", api.JobEvent{}},
		{"Attempt", api.JobAttempt{}},
		{"Blob", api.Blob{}},
		{"JobList", api.JobList{}},
		{"WorkerClaim", api.WorkerClaim{}},
		{"WorkerHeartbeat", api.WorkerHeartbeatRequest{}},
		{"CreateRequest", api.JobCreateRequest{}},
		{"Session", api.Session{}},
		{"Stream", api.Stream{}},
		{"StreamQueue", api.StreamQueue{}},
		{"SessionCreateRequest", api.SessionCreateRequest{}},
		{"StreamCreateRequest", api.StreamCreateRequest{}},
		{"TaskStream", api.TaskStream{}},
		{"Task", api.Task{}},
		{"TaskList", api.TaskList{}},
		{"EnqueueRequest", api.EnqueueRequest{}},
		{"RequeueRequest", api.RequeueRequest{}},
		{"TaskClaimRequest", api.TaskClaimRequest{}},
		{"TaskCompleteRequest", api.TaskCompleteRequest{}},
		{"TaskFailRequest", api.TaskFailRequest{}},
		{"TaskHeartbeatRequest", api.TaskHeartbeatRequest{}},
		{"PurgeRequest", api.PurgeRequest{}},
		{"PurgeResult", api.PurgeResult{}},
		{"TaskClass", api.TaskClass{}},
		{"Tool", api.Tool{}},
		{"Script", api.Script{}},
		{"Project", api.Project{}},
		{"Registry", api.Registry{}},
		{"DevStatus", api.DevStatus{}},
		{"Gateway", api.Gateway{}},
		{"Worker", api.Worker{}},
		{"GatewayRegisterRequest", api.GatewayRegisterRequest{}},
		{"WorkerRegisterRequest", api.WorkerRegisterRequest{}},
		{"GatewayList", api.GatewayList{}},
		{"WorkerList", api.WorkerList{}},
		{"GatewayDeregistered", api.GatewayDeregistered{}},
		{"HeartbeatAnswer", api.HeartbeatAnswer{}},
		{"ClusterLeader", api.ClusterLeader{}},
		{"ClusterNode", api.ClusterNode{}},
		{"SystemState", api.SystemState{}},
		{"QueueDepth", api.QueueDepth{}},
		{"Agent", api.Agent{}},
		{"AgentTask", api.AgentTask{}},
		{"AgentList", api.AgentList{}},
		{"RouteRequest", api.RouteRequest{}},
		{"RouteAnswer", api.RouteAnswer{}},
		{"ControlTask", api.ControlTask{}},
		{"ControlTaskClaimRequest", api.ControlTaskClaimRequest{}},
		{"ControlTaskClaim", api.ControlTaskClaim{}},
		{"TaskStepRequest", api.TaskStepRequest{}},
		{"TaskStepAnswer", api.TaskStepAnswer{}},
		{"FeedEvent", api.Event{}},
		{"EventGap", api.EventGap{}},
		{"EventFeedState", api.EventFeedState{}},
		{"StreamInfo", api.StreamInfo{}},
		{"ScheduleRequest", api.ScheduleRequest{}},
		{"Schedule", api.Schedule{}},
		{"ScheduleRun", api.ScheduleRun{}},
		{"ScheduleList", api.ScheduleList{}},
		{"ScheduleTrigger", api.ScheduleTrigger{}},
	} {
		if got, want := schemaProps(t, doc, c.schema), jsonFields(c.view); !slices.Equal(got, want) {
			t.Errorf("schema %s properties %v, server encodes %v", c.schema, got, want)
		}
	}
	errProps := doc.Components["schemas"]["Error"].(map[string]interface{})["properties"].(map[string]interface{})["error"].(map[string]interface{})
	var props []string
	for k := range errProps["properties"].(map[string]interface{}) {
		props = append(props, k)
	}
	sort.Strings(props)
	if want := jsonFields(api.ErrorDetail{}); !slices.Equal(props, want) {
		t.Errorf("Error.error properties %v, server encodes %v", props, want)
	}
	var codes []string
	for _, c := range errProps["properties"].(map[string]interface{})["code"].(map[string]interface{})["enum"].([]interface{}) {
		codes = append(codes, c.(string))
	}
	want := []string{api.CodeInvalidJSON, api.CodeInvalidRequest, api.CodeUnauthorized, api.CodeForbidden, api.CodeNotOwner, api.CodeTargetMismatch,
		api.CodeNotFound, api.CodeMethodNotAllowed, api.CodeIllegalTransition, api.CodeStaleLease, api.CodeMaxAttempts, api.CodeTooLarge, api.CodeNoLeader,
		api.CodeOutcomeUnknown, api.CodeInternal, api.CodeStreamEnded, api.CodeStreamPaused, api.CodeMissingCapability, api.CodeNotYetClaimable, api.CodeAlreadyExists, api.CodeSessionEnded, api.CodeStreamRequired,
		api.CodeUpgradeInProgress, api.CodeNoHealthyGateway, api.CodeUnsupportedMediaType, api.CodeHeadersTooLarge, api.CodeRequestTimeout,
		api.CodeNotImplemented, api.CodeCommentLimit, api.CodeTooManySessions,
		api.CodeResultMismatch, api.CodeUnsupportedSchema}
	sort.Strings(codes)
	sort.Strings(want)
	if !slices.Equal(codes, want) {
		t.Errorf("Error codes %v, server has %v", codes, want)
	}
}
