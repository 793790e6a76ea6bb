

def test_parameter_round_trip_keeps_the_type():
    import io

    import ember
    p = ember.nn.Parameter(ember.ones(3))
    buf = io.BytesIO()
    ember.save({"w": p}, buf)
    buf.seek(0)
    w = ember.load(buf)["w"]
    assert isinstance(w, ember.nn.Parameter) and w.requires_grad
