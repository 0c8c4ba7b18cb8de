package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// reflectJob is Job without its MarshalJSON: encoding/json encodes it by
// reflection, as it encoded a job before the hand-written encoder.
type reflectJob Job

// reflectList is JobList of reflectJobs, encoded by reflection.
type reflectList struct {
	Jobs       []*reflectJob  `json:"jobs"`
	NextCursor NullableString `json:"nextCursor"`
}

func reflectListOf(l JobList) reflectList {
	out := reflectList{NextCursor: l.NextCursor}
	if l.Jobs != nil {
		out.Jobs = make([]*reflectJob, len(l.Jobs))
		for i, j := range l.Jobs {
			out.Jobs[i] = (*reflectJob)(j)
		}
	}
	return out
}

var (
	jsonStrings = []string{"", "a", "left_claw", "job-0001", `quo"te`, `back\slash`, "<script>&amp;</script>", "tab\tnew\nline\r",
		"\b\f\x00\x1f\x7f", "héllo wörld", "日本語", "\u2028\u2029", "bad \xff utf8 \xe2\x80", "emoji 🎉", "ok/slash"}
	jsonRaws = []string{`{"n":1}`, `{ "n" : [1, 2, {"x": "<b>"}] }`, "\"\u2028\"", `"a&b"`, `[]`, `null`, `true`, `-1.5e3`,
		"{\n\t\"deep\": {\"s\": \"é>\"}\n}", `{"pad":"xxxxxxxxxxxxxxxx"}`}
)

// randomJob fills every field of a job (and of the values it points to) at
// random: each left zero half of the time.
func randomJob(r *rand.Rand) *Job {
	j := new(Job)
	fill(r, reflect.ValueOf(j).Elem(), 0)
	return j
}

func fill(r *rand.Rand, v reflect.Value, depth int) {
	switch {
	case v.Type() == reflect.TypeOf(time.Time{}):
		if r.IntN(2) == 0 {
			v.Set(reflect.ValueOf(time.Unix(r.Int64N(4e9), r.Int64N(1e9)*int64(r.IntN(2))).UTC()))
		}
		return
	case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
		if r.IntN(2) == 0 {
			v.SetBytes([]byte(jsonRaws[r.IntN(len(jsonRaws))]))
		}
		return
	}
	if depth > 6 && (v.Kind() == reflect.Slice || v.Kind() == reflect.Pointer) {
		return // a claim holds claims: stop the nesting somewhere
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		if r.IntN(2) == 0 {
			p := reflect.New(v.Type().Elem())
			fill(r, p.Elem(), depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		switch r.IntN(3) {
		case 0: // nil
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			s := reflect.MakeSlice(v.Type(), 1+r.IntN(3), 3)
			for i := range s.Len() {
				fill(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.String:
		if r.IntN(2) == 0 {
			v.SetString(jsonStrings[r.IntN(len(jsonStrings))])
		}
	case reflect.Int, reflect.Int64:
		if r.IntN(2) == 0 {
			v.SetInt(r.Int64N(1<<40) - 1<<39)
		}
	case reflect.Uint64:
		if r.IntN(2) == 0 {
			v.SetUint(r.Uint64())
		}
	case reflect.Float64:
		if r.IntN(2) == 0 {
			v.SetFloat(r.Float64() * 1e6)
		}
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	}
}

// TestJobJSONMatchesEncodingJSON: the hand-written encoder writes what
// encoding/json writes for any job, every field set or left zero at
// random, strings and raw JSON that need escaping or compacting included:
// alone, inside a list, and through an Encoder as the server writes
// answers. A field added to Job and not to AppendJSON fails it.
func TestJobJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		j := randomJob(r)
		want, err := json.Marshal((*reflectJob)(j))
		if err != nil {
			t.Fatal(err)
		}
		if got := j.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("job %d:\n got %s\nwant %s", i, got, want)
		}
		// In a page of jobs, encoded by hand or through an Encoder (as a
		// job inside another answer is).
		other := randomJob(r)
		l := JobList{Jobs: []*Job{j, nil, other}, NextCursor: NullableString(jsonStrings[r.IntN(len(jsonStrings))])}
		wantList, _ := json.Marshal(reflectListOf(l))
		var viaEncoder bytes.Buffer
		if err := json.NewEncoder(&viaEncoder).Encode(struct{ L JobList }{l}); err != nil {
			t.Fatal(err)
		}
		if got := l.AppendJSON(nil); !bytes.Equal(got, wantList) {
			t.Fatalf("job %d in a list:\n got %s\nwant %s", i, got, wantList)
		}
		if got, want := viaEncoder.String(), `{"L":`+string(wantList)+"}\n"; got != want {
			t.Fatalf("job %d through an encoder:\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestJobListJSONEmpty(t *testing.T) {
	for l, want := range map[*JobList]string{
		{}:                                   `{"jobs":null,"nextCursor":null}`,
		{Jobs: []*Job{}}:                     `{"jobs":[],"nextCursor":null}`,
		{Jobs: []*Job{nil}, NextCursor: "c"}: `{"jobs":[null],"nextCursor":"c"}`,
	} {
		if got := string(l.AppendJSON(nil)); got != want {
			t.Errorf("%+v: %s, want %s", *l, got, want)
		}
		if std, _ := json.Marshal(reflectListOf(*l)); string(std) != want {
			t.Errorf("encoding/json writes %s, want %s", std, want)
		}
	}
}

func BenchmarkJobJSON(b *testing.B) {
	now := time.Now().UTC()
	j := &Job{ID: "0b7a5d3c-5f1e-4c2a-9d8b-7e6f5a4b3c2d", Stream: "default", Payload: json.RawMessage(`{"n":1,"pad":"` + string(bytes.Repeat([]byte("x"), 240)) + `"}`),
		Status: JobStatusQueued, MaxAttempts: 5, Backoff: &Backoff{Base: 1, Max: 60}, Comments: []Comment{}, IdempotencyKey: "key-1",
		CreatedAt: now, UpdatedAt: now, CreateIndex: 123456, ModifyIndex: 123456}
	page := JobList{Jobs: make([]*Job, 1000)}
	for i := range page.Jobs {
		page.Jobs[i] = j
	}
	// Each value by hand, then as encoding/json writes its reflective twin.
	both := func(name string, hand func([]byte) []byte, std any) {
		b.Run(name+"/hand", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for range b.N {
				buf = hand(buf[:0])
			}
		})
		b.Run(name+"/reflect", func(b *testing.B) {
			b.ReportAllocs()
			var buf bytes.Buffer
			for range b.N {
				buf.Reset()
				_ = json.NewEncoder(&buf).Encode(std)
			}
		})
	}
	both("job", j.AppendJSON, (*reflectJob)(j))
	both("page=1000", page.AppendJSON, reflectListOf(page))
}

// strictCreate decodes a create's body as the strict decoder alone does.
func strictCreate(b []byte) (JobCreateRequest, error) {
	var in jobCreateJSON
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	err := d.Decode(&in)
	var r JobCreateRequest
	if err == nil {
		r.fromJSON(&in)
	}
	return r, err
}

// TestCreateBodyDecodesAsTheStrictDecoder: a create's body whose member
// names are all known takes json.Unmarshal, any other the strict decoder;
// either way the request, and the error of a body that is refused, are
// the strict decoder's.
func TestCreateBodyDecodesAsTheStrictDecoder(t *testing.T) {
	bodies := []string{
		`{}`, `{"payload":1}`, ` { "payload" : {"a":[1,{"b":"}"}]} , "stream":"s" } `,
		`{"payload":"x","maxAttempts":3,"target":"gpu","stream":"s","leaseSeconds":30,"taskClass":"c","idempotencyKey":"k","priority":-5,
		  "runAt":"2026-01-02T03:04:05Z","delaySeconds":7,"backoff":{"base":1,"max":9},"concurrencyKey":"ck","concurrencyLimit":2,
		  "dependsOn":["a","b"],"onDependencyFailure":"run","requires":["gpu"],"resultSchema":{"type":"object"},"rateLimit":{"key":"r","limit":1,"periodSeconds":1.5}}`,
		`{"PAYLOAD":1,"Stream":"s"}`, `{"payload":1,"streams":"s"}`, `{"payload":1,"str\u0065am":"s"}`, `{"payload":1,"\u017ftream":"s"}`,
		`{"payload":"a\"}b","stream":"s"}`, `{"payload":[],"maxAttempts":"3"}`, `{"payload":1,"runAt":"yesterday"}`,
		`{"payload":1,"leaseSeconds":null,"stream":null,"maxAttempts":null}`, `{"payload":true,"dependsOn":"x"}`,
		`{"payload":1,"payload":2}`, `{"payload":1,"rateLimit":{"key":"k","limit":1,"periodSeconds":1,"window":3}}`,
		`{"payload":1,"backoff":{"base":1,"cap":3}}`, `{"payload":{"deep":{"deeper":[[["]"]]]}},"extra":{}}`, `{"payload":1e400}`,
	}
	for _, body := range bodies {
		want, wantErr := strictCreate([]byte(body))
		var got JobCreateRequest
		gotErr := got.UnmarshalJSON([]byte(body))
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("%s: error %v, the strict decoder's %v", body, gotErr, wantErr)
			continue
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", body, got, want)
		}
	}
	for body, fast := range map[string]bool{`{"payload":1,"stream":"s"}`: true, `{"Payload":1}`: true, `{"payload":1,"x":2}`: false,
		`{"payload":1,"str\u0065am":"s"}`: false, `{"payload":"}","stream":"{"}`: true} {
		if got := onlyCreateFields([]byte(body)); got != fast {
			t.Errorf("%s: onlyCreateFields %v, want %v", body, got, fast)
		}
	}
}
